"""`ctx.sleep` / `ctx.sleep_until`: durable waits with absolute deadlines."""

from __future__ import annotations

from datetime import datetime

from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, validate_name
from dormant.workflow.signals import RollbackStop, Suspend
from dormant.workflow.waits import Outcome, wait_in_process


def epoch_seconds(when: datetime | float | int) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError(f"sleep_until needs an aware datetime (with tzinfo), got naive {when!r}")
        return when.timestamp()
    return float(when)


async def run_sleep_until(frame: Frame, name: str, deadline: float) -> None:
    validate_name(name, "sleep")
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    entry = scope.claim(EntryKind.SLEEP, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        # The deadline is fixed when first reached; replays use the stored one.
        entry = ex.new_entry(EntryKind.SLEEP, scope.child(name), name, deadline=deadline)
        ex.touch(entry)
    else:
        ex.replayed += 1
    if entry.status is EntryStatus.COMPLETED:
        return
    if ex.now() >= (entry.deadline or 0.0):
        if not ex.rolling_back:
            entry.status = EntryStatus.COMPLETED
            ex.touch(entry)
        return
    if ex.rolling_back:
        raise RollbackStop()
    if await wait_in_process(ex, entry.deadline, messages=False) is Outcome.DUE:
        frame.check_cancelled()  # a race decided meanwhile: this branch lost, its sleep did not complete
        entry.status = EntryStatus.COMPLETED
        ex.touch(entry)
        return
    raise Suspend(deadline=entry.deadline, reason="sleep")
