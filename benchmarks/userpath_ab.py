"""Two Dormant trees side by side through the public API (benchmarks/userpath.py: TestEnv, create or `send`, then
`run_until_idle`, process CPU time): every row of `make bench-peers`' Dormant column, old against new, and each
tree's limited step over its plain one (issue 28: at most 1.3x).

    git archive ec7c420 lib | tar -x -C /tmp/ec/lib-parent && git archive HEAD lib | tar -x -C /tmp/ec/lib-head
    .venv/bin/python benchmarks/userpath_ab.py --a /tmp/ec/lib-parent/lib --b /tmp/ec/lib-head/lib --rounds 7

Each round runs one measuring process per tree (`benchmarks/peers.py --measure`, PYTHONPATH=<lib>:<checkout>),
alternating which goes first, so that whatever else the machine does hits both alike. A row a tree cannot run (a
tree from before flow control has no limited step, one from before ctx.map no map rows) is "n/a". The table gives
each row's median per tree and the min and median of the per-round ratios b / a.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import ROOT, ROWS, run_dormant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="the library directory of the old tree (holds dormant/)")
    parser.add_argument("--b", default=str(ROOT / "lib"), help="the library directory of the new tree")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    sides = {"a": args.a, "b": args.b}
    samples: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for round_ in range(args.rounds):
        for side in ("a", "b") if round_ % 2 == 0 else ("b", "a"):
            samples[side].append(run_dormant(args.n, sides[side]))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"a = {args.a}\nb = {args.b}\n{args.rounds} rounds (alternating), N = {args.n:,}, load {load}; CPU "
          "microseconds per item (us) or bytes per item (B), medians; b / a: min and median of the per-round ratios\n")
    print("| row | unit | a | b | b / a: min | median |\n|---|---|---:|---:|---:|---:|")
    for row, unit in ROWS:
        scale = 1e6 if unit == "us" else 1.0
        a = [s[row] for s in samples["a"] if row in s]
        b = [s[row] for s in samples["b"] if row in s]
        cells = [f"{statistics.median(v) * scale:,.1f}" if v else "n/a" for v in (a, b)]
        ratios = [y / x for x, y in zip(a, b, strict=True)] if a and b else []
        cells += [f"{min(ratios):.3f}", f"{statistics.median(ratios):.3f}"] if ratios else ["n/a", "n/a"]
        print(f"| {row} | {unit} | " + " | ".join(cells) + " |")
    print("\nlimited step / fresh step (issue 28: <= 1.3), min and median of the per-round ratios:")
    for side in ("a", "b"):
        ratios = [s["limited step"] / s["fresh step"] for s in samples[side] if "limited step" in s]
        print(f"  {side}: " + (f"{min(ratios):.3f} | {statistics.median(ratios):.3f}" if ratios else "n/a"))


if __name__ == "__main__":
    main()
