"""The learned read schedule of `send(wait=True)` (dormant.runtime.reply_timing) against the doubling polls it
replaced, simulated (no I/O): for answers that come at a given time, give or take a spread, how late the wait
sees them and how many reads it makes, and the two together in milliseconds of the API function's time (a read
priced as READ_SECONDS of it).

    .venv/bin/python benchmarks/reply_schedule.py

Each read takes READ_MS (a GetItem's round trip); the learned schedule is warmed on 300 answers first, then both
are run on the same 2,000 answer times. Measured on a deployment-like stack: benchmarks/requests.py --only request.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable

from dormant.runtime.reply_timing import READ_SECONDS, ReplyTiming

READ_MS = 5.0
CASES = [(50, 0.1), (150, 0.1), (300, 0.2), (600, 0.3), (2000, 0.3)]  # answer time in ms, spread (+-)


def doubling(answer: float) -> tuple[float, int]:
    """The schedule before reply_timing (dormant.dynamodb.outputs.poll): a read at once, then pauses of 20 ms
    doubling up to 250 ms. Returns (seconds until the answer was seen, reads)."""
    elapsed, pause, reads = 0.0, 0.02, 0
    while True:
        elapsed += READ_MS / 1000
        reads += 1
        if elapsed >= answer:
            return elapsed, reads
        elapsed += pause
        pause = min(pause * 2, 0.25)


def learned(timing: ReplyTiming, answer: float) -> tuple[float, int]:
    schedule = timing.schedule("bench")
    elapsed = 0.0
    while True:
        elapsed += schedule.pause(elapsed)
        found = elapsed >= answer
        schedule.looked(elapsed, found)
        elapsed += READ_MS / 1000
        if found:
            return elapsed, schedule.reads


def summary(rows: list[tuple[float, int, float]]) -> tuple[float, float, float]:
    late = statistics.mean(seen - answer for seen, _, answer in rows) * 1000
    reads = statistics.mean(n for _, n, _ in rows)
    return late, reads, late + reads * READ_SECONDS * 1000


def main() -> None:
    print("| answers at | doubling: ms late, reads, ms-equivalent | learned: ms late, reads, ms-equivalent |\n"
          "|---|---:|---:|")
    for center_ms, spread in CASES:
        draw = random.Random(29)

        def answer(center: float = center_ms / 1000, spread: float = spread,
                   uniform: Callable[[float, float], float] = draw.uniform) -> float:
            return center * uniform(1 - spread, 1 + spread)

        timing = ReplyTiming()
        for _ in range(300):
            learned(timing, answer())
        times = [answer() for _ in range(2000)]
        old = summary([(*doubling(a), a) for a in times])
        new = summary([(*learned(timing, a), a) for a in times])
        print(f"| {center_ms} ms +-{spread:.0%} | {old[0]:.0f}, {old[1]:.1f}, {old[2]:.0f} | "
              f"{new[0]:.0f}, {new[1]:.1f}, {new[2]:.0f} |")


if __name__ == "__main__":
    main()
