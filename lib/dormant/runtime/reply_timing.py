"""When a waiting sender looks for its answer: a read schedule learned from the answers this process has seen.

On Lambda the API function waits for a `send(wait=True)` answer billed per millisecond, and each look is a
priced read (DynamoDB has no server-side long poll). Both are spent only where the answer may be:

- **The first read at the median wake-up latency** (SQS delivery, the worker's load, run and commit) of the
  actor type: the reads before it would mostly find nothing, and are saved. The median is learned per
  process and per actor type by stochastic quantile tracking, which needs only what a waiter knows anyway,
  whether its first read found the answer: found, the first read moves earlier by a step, missed, later
  by a step. The two balance where half the answers are found at the first read.
- **Then reads spaced by the spread of the answers** (20 ms to 1 s apart): reads T apart hold the API T/2
  past an answer on average and make W/T reads for an answer spread over W seconds; the sum (T/2 of Lambda
  time plus the reads' price) is lowest at T = sqrt(W x READ_SECONDS). W is learned too: how long after a
  missed first read the answer was found (a moving average per actor type), or how long this wait has
  already gone past its first read, whichever is longer (a slow answer widens its own window).

Only waits that an answer ends teach (one that none ends, say a send to a queue whose receive does not answer,
would push the first read late for the answered ones), and only when their first read was made on schedule.
This module does no I/O: the store reads, it schedules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FIRST_DEFAULT = 0.1
"""Seconds before the first read of an actor type no answer has been seen for: about a wake-up on AWS
(SQS FIFO to a Lambda event source, one load and one commit; docs/performance.md "request/response")."""
FIRST_MIN, FIRST_MAX = 0.01, 5.0
STEP = 0.2
"""The learning step, in log seconds: a found first read makes the next one 9.5 % earlier, a missed one
10.5 % later (fast enough to follow a changed load within about 20 calls, small enough to hold still)."""
QUANTILE = 0.5
READ_SECONDS = 0.019
"""One read's price in seconds of the API function's time: a consistent GetItem under 4 KB ($0.125 per
million) against the template's 512 MB arm64 function ($0.0000133334 per GB-second): 19 ms."""
PAUSE_MIN, PAUSE_MAX = 0.02, 1.0


LATE_DEFAULT = 0.05
"""Seconds over which answers that miss the first read come, before any has been seen."""
LATE_WEIGHT = 0.2
"""The weight of a new observation in the moving average of that spread."""


@dataclass(slots=True)
class Learned:
    """What one actor type's answers have taught: the first read's delay, the late answers' spread."""

    first: float = FIRST_DEFAULT
    late: float = LATE_DEFAULT


@dataclass(slots=True)
class ReplyTiming:
    """The learned timing per actor type (one per process: `TIMING`)."""

    kinds: dict[str, Learned] = field(default_factory=dict)

    def schedule(self, kind: str) -> ReadSchedule:
        """The schedule of one wait for an answer of an actor of type `kind`."""
        learned = self.kinds.get(kind) or Learned()
        return ReadSchedule(self, kind, learned.first, learned.late)

    def expected(self, kind: str) -> float:
        """Seconds after which about half of this type's answers have been there."""
        return (self.kinds.get(kind) or Learned()).first

    def learn_first(self, kind: str, first: float, found: bool) -> None:
        """A wait's first read, made on schedule `first` seconds into it, found the answer or not."""
        learned = self.kinds.setdefault(kind, Learned())
        moved = first * math.exp(STEP * (QUANTILE - (1.0 if found else 0.0)))
        learned.first = min(max(moved, FIRST_MIN), FIRST_MAX)

    def learn_late(self, kind: str, late: float) -> None:
        """A wait whose first read missed found its answer `late` seconds after that read."""
        learned = self.kinds.setdefault(kind, Learned())
        learned.late = min(max(learned.late + LATE_WEIGHT * (late - learned.late), 0.0), FIRST_MAX)


@dataclass(slots=True)
class ReadSchedule:
    """The pauses before each read of one wait (`pause(elapsed)`), told what each read found (`looked`)."""

    timing: ReplyTiming
    kind: str
    first: float
    late: float
    reads: int = 0
    on_schedule: bool = False  # the first read was made at `first` (or found the answer before it)

    def pause(self, elapsed: float) -> float:
        """Seconds to wait before the next read, `elapsed` seconds into the wait."""
        if self.reads == 0:
            return max(self.first - elapsed, 0.0)
        window = max(elapsed - self.first, self.late)
        return min(max(math.sqrt(window * READ_SECONDS), PAUSE_MIN), PAUSE_MAX)

    def looked(self, elapsed: float, found: bool) -> None:
        """A read was made `elapsed` seconds into the wait and found the answer or not.

        Only a wait that found its answer teaches, and only if its first read was made on schedule (or early,
        and found it: then it was there by the scheduled time too): whether that first read found it, and if
        not, how long after it the answer was. A wait that no answer ends (a receive that does not answer, a
        stopped actor, the deadline) would only teach that answers come late."""
        self.reads += 1
        if self.reads == 1:
            self.on_schedule = found or elapsed >= self.first
        if found and self.on_schedule:
            self.timing.learn_first(self.kind, self.first, self.reads == 1)
            if self.reads > 1:
                self.timing.learn_late(self.kind, elapsed - self.first)


TIMING = ReplyTiming()
"""This process's: an API container (or `dormant dev`) learns from every answer it waits for."""
