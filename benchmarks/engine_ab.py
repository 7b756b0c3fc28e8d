"""Two engines side by side: CPU per fresh step, per replayed entry and per drained message, old against new.

    git archive <base> lib | tar -x -C /tmp/base && git archive HEAD lib | tar -x -C /tmp/head
    .venv/bin/python benchmarks/engine_ab.py --a /tmp/base/lib --b /tmp/head/lib --rounds 7

Measure copies that sit side by side (as above): the same code measured from the checkout and from /tmp differed
by up to 5% per replayed entry on one machine, more than the change being measured may make.

Each round runs one measuring process per library (PYTHONPATH=<lib>:<checkout>), alternating which goes first,
so that whatever else the machine does hits both alike; a process times each case after a warm-up and reports
the median of its runs (process CPU time, engine only: `Execution` + `run_workflow` over the memory store's
snapshot with a no-op checkpointer, as benchmarks/engine.py's engine rows). The table gives the median over the
rounds and b's change against a. Cases:

- fresh step: one run of N sequential new steps, CPU / N;
- replayed entry: a history of N completed steps replayed up to a queue wait, CPU / N;
- drained message: the DESIGN counter (a loop; per message an iteration, a queue receive and a step) with N
  messages queued, one run draining them all, CPU / N (the same drain as a whole wake-up, memory store and a
  commit per message included, in the last row).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ("fresh step", "replayed entry", "drained message", "drained message, whole wake-up")


# ---- the measuring process (imports whichever dormant PYTHONPATH names) --------------------------
async def _median_cpu(run: Callable[[], Awaitable[None]], runs: int,
                      setup: Callable[[], Awaitable[None]] | None = None) -> float:
    import gc

    samples = []
    for i in range(runs + 1):
        if setup is not None:
            await setup()
        gc.collect()
        start = time.process_time()
        await run()
        if i:  # the first is the warm-up
            samples.append(time.process_time() - start)
    return statistics.median(samples)


async def measure(n: int, runs: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engine as bench  # benchmarks/engine.py: the same actors and harness

    import dormant
    from dormant.ports import InboxMessage
    from dormant.runtime.wake import wake_actor
    from dormant.workflow.history import WorkflowState

    out: dict[str, Any] = {"lib": str(Path(dormant.__file__).resolve().parents[1])}
    # fresh steps
    service = bench.new_service()
    ref = service.ref("bench-steps", [str(uuid.uuid4())])
    await service.ensure_created(ref, bench.StepsInput(steps=n).model_dump())
    fresh = await bench.load(service, ref)

    async def steps() -> None:
        record, _ = await bench.engine_run(service, fresh)
        assert record.state is WorkflowState.COMPLETED and record.output == n

    out["fresh step"] = await _median_cpu(steps, runs) / n
    # replayed entries
    service, ref = await bench.replay_actor(n)
    recorded = await bench.load(service, ref)

    async def replay() -> None:
        record, execution = await bench.engine_run(service, recorded)
        assert record.state is WorkflowState.SLEEPING and execution.replayed == n

    out["replayed entry"] = await _median_cpu(replay, runs) / n

    # drained messages
    async def counter_with_messages() -> tuple[Any, Any]:
        service = bench.new_service()
        ref = service.ref(bench.counter.name, [str(uuid.uuid4())])
        await service.ensure_created(ref)
        assert (await wake_actor(service, ref)).outcome == "sleeping"  # waiting for its first message
        for _ in range(n):
            await service.store.enqueue(ref, InboxMessage(id=str(uuid.uuid4()), queue="counter", body={"delta": 1},
                                                          created_at=service.clock.now()))
        return service, ref

    service, ref = await counter_with_messages()
    queued = await bench.load(service, ref)

    async def drain() -> None:
        record, execution = await bench.engine_run(service, queued)
        assert record.state is WorkflowState.SLEEPING and execution.state.value.processed == n

    out["drained message"] = await _median_cpu(drain, runs) / n
    holder: dict[str, Any] = {}

    async def fresh_counter() -> None:
        holder["actor"] = await counter_with_messages()

    async def drain_wake() -> None:
        service, ref = holder["actor"]
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.commits >= n, report

    out["drained message, whole wake-up"] = await _median_cpu(drain_wake, runs, fresh_counter) / n
    return out


# ---- the driver ------------------------------------------------------------------------------------
def run_one(lib: str, n: int, runs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lib).resolve()), str(ROOT)])}
    done = subprocess.run([sys.executable, __file__, "--measure", "--n", str(n), "--runs", str(runs)], env=env,
                          check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result.pop("lib") != str(Path(lib).resolve()):  # the editable install must not win over PYTHONPATH
        raise SystemExit(f"the measuring process did not import dormant from {lib}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="the library directory of the old engine (holds dormant/)")
    parser.add_argument("--b", default=str(ROOT / "lib"), help="the library directory of the new engine")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000, help="steps, entries, messages per run")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per case in one process (median)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(measure(args.n, args.runs))))
        return
    if not args.a:
        parser.error("--a is required")
    samples: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for round_ in range(args.rounds):
        order = ("a", "b") if round_ % 2 == 0 else ("b", "a")
        for side in order:
            samples[side].append(run_one(getattr(args, side), args.n, args.runs))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"a = {args.a}\nb = {args.b}\n{args.rounds} rounds (alternating), N = {args.n}, median of {args.runs} "
          "runs per process; CPU microseconds per item, median over the rounds (min-max)\n")
    print("| case | a | b | b/a |\n|---|---:|---:|---:|")
    for case in CASES:
        a = [s[case] * 1e6 for s in samples["a"]]
        b = [s[case] * 1e6 for s in samples["b"]]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {case} | {ma:.2f} ({min(a):.2f}-{max(a):.2f}) | {mb:.2f} ({min(b):.2f}-{max(b):.2f}) "
              f"| {mb / ma:.3f} |")


if __name__ == "__main__":
    main()
