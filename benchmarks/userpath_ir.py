"""Instructions per item of Dormant trees on the rows of benchmarks/userpath.py, counted by valgrind (cachegrind
without its cache simulation): the same count whatever else the machine runs, where CPU time on a loaded 2-core
machine moves by tens of percent between rounds. A count is not a time (a C call's instructions weigh as the
interpreter's do), so this only says which tree does less work on the same workload: take the times from
benchmarks/userpath_ab.py.

    .venv/bin/python benchmarks/userpath_ir.py --lib /tmp/ec/lib --lib /tmp/head/lib            # about 20 s per run
    .venv/bin/python benchmarks/userpath_ir.py --lib /tmp/head/lib --rows drain

Each row runs twice per tree, its setup alone and its setup with the measured work, in one process each (TestEnv,
PYTHONPATH=<lib>:<checkout>); the difference over the items is the figure. The workloads: one wake-up draining
2,000 messages queued (sends not included); 30 loop wake-ups at age 10 (a send and `run_until_idle` each); 20
messages each changing one part of a 5 MB state; one wake-up of 1,000 fresh steps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = {"drain": ("drain of queued messages", 2000), "wake10": ("loop wake-up at age 10", 30),
        "big": ("5 MB state, one part changed", 20), "fresh": ("fresh step", 1000)}


async def _work(row: str, measured: bool) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import userpath

    await userpath.drain(50)  # (the first wake-up's one-time costs: imports, caches)
    items = ROWS[row][1]
    async with userpath.env() as e:
        if row == "drain":
            key = str(uuid.uuid4())
            await userpath.create(e, userpath.drain_actor.name, [key])
            await e.run_until_idle()
            ref = e.service.ref(userpath.drain_actor.name, [key])
            for _ in range(items):
                await e.store.enqueue(ref, userpath.queued_message())
            if measured:
                await e.transport.wake(ref)
                await e.run_until_idle()
        elif row == "wake10":
            handle = await userpath.create(e, userpath.drain_actor.name, [str(uuid.uuid4())])
            for _ in range(10):
                await handle.send("inc", {"d": 1})
            await e.run_until_idle()
            for _ in range(items if measured else 0):
                await handle.send("inc", {"d": 1})
                await e.run_until_idle()
        elif row == "big":
            handle = await userpath.create(e, userpath.big_actor.name, [str(uuid.uuid4())])
            await handle.send("change", {"part": 50_000, "i": 0})
            await e.run_until_idle()
            for i in range(items if measured else 0):
                await handle.send("change", {"part": 50_000, "i": i + 1})
                await e.run_until_idle()
        else:
            await userpath.create_and_run(e, userpath.steps_actor.name,
                                           userpath.Spec(steps=items if measured else 0).model_dump())


def _instructions(lib: str, row: str, measured: bool) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lib).resolve()), str(ROOT)])}
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, __file__, "--run", row, *(["--measured"] if measured else [])],
                          env=env, check=True, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", action="append", help="a library directory (holds dormant/); repeat for more")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of {','.join(ROWS)}")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        asyncio.run(_work(args.run, args.measured))
        return
    libs = args.lib or [str(ROOT / "lib")]
    rows = args.rows.split(",")
    print("| row | " + " | ".join(libs) + " | " + " | ".join(f"{lib} / first" for lib in libs[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(libs) - 1))
    for row in rows:
        name, items = ROWS[row]
        counts = [(_instructions(lib, row, True) - _instructions(lib, row, False)) / items for lib in libs]
        print(f"| {name} | " + " | ".join(f"{count / 1000:,.1f}k" for count in counts) + " | "
              + " | ".join(f"{count / counts[0]:.3f}" for count in counts[1:]) + " |", flush=True)


if __name__ == "__main__":
    main()
