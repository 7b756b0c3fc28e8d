"""Dormant beside RivetKit (`make bench-peers`): the same workloads, one interleaved run, process CPU time.

    make bench-peers        # installs tools/bench-peers (npm ci; never needed by `make test`), then:
    .venv/bin/python benchmarks/peers.py --node-dir tools/bench-peers --rounds 5

Each round runs one process per engine, alternating which goes first, so that whatever else the machine does hits
both alike; each process warms up, then times each workload once (CPU per item). The table gives, per row, both
engines' medians and the min and median of the per-round ratios Dormant / RivetKit.

- Dormant: through the public API as a user's tests run it (benchmarks/userpath.py: TestEnv, create or `send`, then
  `run_until_idle`);
- RivetKit: `@rivetkit/workflow-engine` 2.3.19 on its in-memory driver with no simulated latency
  (tools/bench-peers/rivetkit.mjs).

Rows: a fresh run of N steps (CPU per step); N sends to a queue loop and the wake-ups that drain them (sends
included, CPU per message). The AWS durable execution SDK's column and the other rows of issue 28 are not built yet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("fresh step", "send + drain")


async def dormant(n: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import userpath

    await userpath.fresh_steps(n)
    await userpath.send_drain(n)  # warm-up
    return {"fresh step": await userpath.fresh_steps(n) / n, "send + drain": await userpath.send_drain(n) / n}


def run_dormant(n: int, lib: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lib).resolve()), str(ROOT)])}
    done = subprocess.run([sys.executable, __file__, "--measure", "--n", str(n)], env=env, check=True,
                          capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_rivetkit(node_dir: Path, n: int) -> dict[str, float]:
    done = subprocess.run(["node", "rivetkit.mjs", str(n)], cwd=node_dir, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-dir", default=str(ROOT / "tools" / "bench-peers"))
    parser.add_argument("--aws-python", help="(not used yet: the AWS SDK's column is not built)")
    parser.add_argument("--lib", default=str(ROOT / "lib"), help="the library directory of the Dormant measured")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(dormant(args.n))))
        return
    samples: dict[str, list[dict[str, Any]]] = {"dormant": [], "rivetkit": []}
    for round_ in range(args.rounds):
        order = ("dormant", "rivetkit") if round_ % 2 == 0 else ("rivetkit", "dormant")
        for side in order:
            samples[side].append(run_dormant(args.n, args.lib) if side == "dormant" else
                                 run_rivetkit(Path(args.node_dir), args.n))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.rounds} rounds (alternating), N = {args.n}, load {load}; CPU microseconds per item\n")
    print("| row | Dormant (median) | RivetKit (median) | Dormant / RivetKit: min | median |")
    print("|---|---:|---:|---:|---:|")
    for row in ROWS:
        ours = [s[row] * 1e6 for s in samples["dormant"]]
        theirs = [s[row] * 1e6 for s in samples["rivetkit"]]
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        print(f"| {row}, N = {args.n:,} | {statistics.median(ours):.1f} | {statistics.median(theirs):.1f} "
              f"| {min(ratios):.3f} | {statistics.median(ratios):.3f} |")


if __name__ == "__main__":
    main()
