"""Dormant beside RivetKit and the AWS durable execution SDK (`make bench-peers`): the same workloads, one interleaved
run, process CPU time.

    make bench-peers        # installs tools/bench-peers (npm ci and the SDK's venv; never needed by `make test`), then:
    .venv/bin/python benchmarks/peers.py --node-dir tools/bench-peers --aws-python tools/bench-peers/aws-venv/bin/python

Each round runs one process per engine, in an order that rotates, so that whatever else the machine does hits them
alike; each process warms up, then times each workload once (CPU per item). The table gives, per row, each engine's
median and the min and median of the per-round ratios of Dormant to each peer.

- Dormant: through the public API as a user's tests run it (benchmarks/userpath.py: TestEnv, create or `send`, then
  `run_until_idle`);
- RivetKit: `@rivetkit/workflow-engine` 2.3.19 on its in-memory driver with no simulated latency
  (tools/bench-peers/rivetkit.mjs): the fresh steps and send + drain rows;
- the AWS durable execution SDK 3.0.0: its `durable_execution` handler invoked in-process on a fake of the checkpoint
  service (benchmarks/peers_aws.py, run by the SDK's venv): fresh steps, replay, ctx.map and memory. It has no
  queues, state or flow-control limits: the rows that need them are "n/a" in its column.

Memory rows are bytes: tracemalloc's peak of one wake-up (invocation) per step or entry beyond a 100-step one's.
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
# (row, unit): "us" CPU microseconds per item, "B" bytes per item
ROWS = (("fresh step", "us"), ("limited step", "us"), ("replayed entry", "us"), ("send + drain", "us"),
        ("drain of queued messages", "us"), ("loop wake-up at age 10", "us"), ("loop wake-up at age 10,000", "us"),
        ("ctx.map, 100 items", "us"), ("ctx.map, 1,000 items", "us"), ("5 MB state, one part changed", "us"),
        ("memory per fresh step", "B"), ("memory per replayed entry", "B"))


async def dormant(n: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import userpath

    await userpath.fresh_steps(n)
    await userpath.send_drain(n)  # warm-up
    return {
        "fresh step": await userpath.fresh_steps(n) / n,
        **({"limited step": await userpath.fresh_steps(n, limited=True) / n} if userpath.HAS_LIMITS else {}),
        "replayed entry": await userpath.replay(n) / n,
        "send + drain": await userpath.send_drain(n) / n,
        "drain of queued messages": await userpath.drain(n) / n,
        "loop wake-up at age 10": await userpath.loop_wake(10),
        "loop wake-up at age 10,000": await userpath.loop_wake(10_000),
        **({"ctx.map, 100 items": await userpath.mapped(100) / 100,
            "ctx.map, 1,000 items": await userpath.mapped(1000) / 1000} if userpath.HAS_MAP else {}),
        "5 MB state, one part changed": await userpath.big_state(5_000_000, 5) / 5,
        "memory per fresh step": await userpath.memory_per_step(n),
        "memory per replayed entry": await userpath.memory_per_entry(n),
    }


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


def run_aws(python: str, n: int) -> dict[str, float]:
    done = subprocess.run([python, str(ROOT / "benchmarks" / "peers_aws.py"), str(n)], check=True,
                          capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _cell(values: list[float], unit: str) -> str:
    return f"{statistics.median(values) * (1e6 if unit == 'us' else 1):,.1f}" if values else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-dir", default=str(ROOT / "tools" / "bench-peers"))
    parser.add_argument("--aws-python", help="the python of the venv that holds the AWS durable execution SDK "
                        "(tools/bench-peers/aws-venv/bin/python); without it, no AWS column")
    parser.add_argument("--lib", default=str(ROOT / "lib"), help="the library directory of the Dormant measured")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(dormant(args.n))))
        return
    sides = ["dormant", "rivetkit"] + (["aws"] if args.aws_python else [])
    samples: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_ in range(args.rounds):
        for side in sides[round_ % len(sides):] + sides[:round_ % len(sides)]:
            samples[side].append(run_dormant(args.n, args.lib) if side == "dormant" else
                                 run_rivetkit(Path(args.node_dir), args.n) if side == "rivetkit" else
                                 run_aws(args.aws_python, args.n))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.rounds} rounds (rotating order), N = {args.n:,}, load {load}; CPU microseconds per item (us) or "
          "bytes per item (B), medians; ratios: min and median of the per-round ratios\n")
    peers = [side for side in sides if side != "dormant"]
    names = {"rivetkit": "RivetKit", "aws": "AWS SDK"}
    print("| row | unit | Dormant | " + " | ".join(names[p] for p in peers) + " | "
          + " | ".join(f"Dormant / {names[p]}: min | median" for p in peers) + " |")
    print("|---|---|---:|" + "---:|" * len(peers) + "---:|---:|" * len(peers))
    for row, unit in ROWS:
        ours = [s[row] for s in samples["dormant"]]
        cells = [_cell(ours, unit)]
        ratio_cells = []
        for peer in peers:
            theirs = [s[row] for s in samples[peer] if row in s]
            cells.append(_cell(theirs, unit))
            ratios = [a / b for a, b in zip(ours, theirs, strict=True)] if theirs else []
            ratio_cells += [f"{min(ratios):.3f}", f"{statistics.median(ratios):.3f}"] if ratios else ["n/a", "n/a"]
        print(f"| {row} | {unit} | " + " | ".join(cells) + " | " + " | ".join(ratio_cells) + " |")


if __name__ == "__main__":
    main()
