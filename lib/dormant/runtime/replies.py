"""What a sender's `send(wait=True)` waits for: the message's response, or the news that none is coming.

The response is read as before (`EventStore.wait_response`). Beside it the waiter loads the actor now and
then (the read every wake-up makes: the workflow record, the live history and the inbox; loads at growing
intervals, no write) and ends as soon as that says no answer will come:

- the workflow took the message with a receive that does not answer (not `completable=True`), or took it
  in a loop iteration that has finished without completing it: status "received";
- the workflow has stopped (failed, diverged, rolling back, paused): the result carries its state, with status
  "queued" while the message is still in the inbox (it runs after a resume or unpause) or "received" if the
  workflow took it before stopping;
- the workflow has ended (completed, terminated) with the message still in the inbox, or discarded by a
  terminate ("queued"), or taken by a completable receive it never answered ("received"): with its state.

The response's reads follow the schedule of dormant.runtime.reply_timing (for a store that polls); the loads
start after most answers have come (CHECK_AFTER), so a call its answer ends pays no load.

The wait's deadline is on the service's clock: under a clock that stands still (TestEnv) it ends when the
test moves the clock past it, however many seconds that is in real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from dormant.models import SendResult
from dormant.ports import FINISHED, ActorRef, ActorSnapshot, Clock, EventStore
from dormant.runtime.reply_timing import TIMING
from dormant.workflow.history import (
    ITERATION_MARK,
    SEPARATOR,
    EntryKind,
    EntryStatus,
    HistoryEntry,
    RecordedMessage,
    WorkflowState,
)

CHECK_FIRST, CHECK_MAX = 0.25, 5.0
"""Real seconds before the first load (at least; see CHECK_AFTER), doubling up to the longest interval: a load
is two read requests (the actor's ring and its pending inbox), priced, so a 25 s wait makes 8 loads beside its
response reads."""
CHECK_AFTER = 3.0
"""The first load waits this many times the actor type's median answer time (reply_timing; at most CHECK_MAX):
most answers come before it, and a wait that an answer ends makes no load at all."""
STILL_FIRST, STILL_MAX = 0.02, 0.2
"""The same under a clock that stands still: a test's store, where a load is cheap and a test should not sit
on news that is already there."""

HALTED: frozenset[WorkflowState] = frozenset({WorkflowState.FAILED, WorkflowState.DIVERGED,
                                              WorkflowState.ROLLING_BACK, WorkflowState.PAUSED})
"""Stopped by an error, or paused: nothing runs until an operator resumes (unpauses) the actor."""
STOPPED: frozenset[WorkflowState] = HALTED | frozenset(FINISHED)
"""Workflow states in which no answer comes (until an operator resumes a halted one)."""


async def await_reply(store: EventStore, clock: Clock, ref: ActorRef, message_id: str, timeout: float) -> SendResult:
    """Wait until message `message_id` is answered, no answer can come, or `timeout` seconds pass on `clock`."""
    deadline = clock.now() + timeout
    watch = asyncio.ensure_future(_watch(store, clock, ref, message_id))
    limit = asyncio.ensure_future(clock.sleep_until(deadline))
    answer: asyncio.Future[tuple[bool, Any]] | None = None
    try:
        while True:
            if answer is None:  # the response poll, as before (started again if it ends first in real time)
                answer = asyncio.ensure_future(store.wait_response(ref, message_id,
                                                                   max(deadline - clock.now(), 0.001)))
            racing: list[asyncio.Future[Any]] = [answer, watch, limit]
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            if answer.done():
                found, response = answer.result()
                if found:
                    return SendResult(status="completed", id=message_id, response=response)
                answer = None
            if watch.done():
                outcome = watch.result()
                found, response = await store.wait_response(ref, message_id, 0)  # answered just before it stopped?
                if found:
                    return SendResult(status="completed", id=message_id, response=response)
                return outcome
            if limit.done() or clock.now() >= deadline:
                return SendResult(status="timedOut", id=message_id)
    finally:
        pending = [task for task in (answer, watch, limit) if task is not None and not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _watch(store: EventStore, clock: Clock, ref: ActorRef, message_id: str) -> SendResult:
    """Load the actor at growing intervals until a load shows that no answer will come."""
    if clock.realtime:
        interval = min(max(CHECK_FIRST, CHECK_AFTER * TIMING.expected(ref.name)), CHECK_MAX)
        longest = CHECK_MAX
    else:
        interval, longest = STILL_FIRST, STILL_MAX
    while True:
        await asyncio.sleep(interval)
        snapshot = await store.load(ref)
        outcome = None if snapshot is None else unanswered(snapshot, message_id)
        if outcome is not None:
            return outcome
        interval = min(interval * 2, longest)


def unanswered(snapshot: ActorSnapshot, message_id: str) -> SendResult | None:
    """The result of a wait that no answer will end (see the module docstring); None while one may come."""
    state = snapshot.workflow.state
    if any(m.id == message_id for m in snapshot.inbox):
        return SendResult(status="queued", id=message_id, workflow=state) if state in STOPPED else None
    if state in HALTED:  # it took the message, then stopped: maybe on it
        return SendResult(status="received", id=message_id, workflow=state)
    ended = state in FINISHED
    receipt = _receipt(snapshot.history, message_id)
    if receipt is None:
        if state is WorkflowState.TERMINATED:  # discarded unprocessed by the terminate (or taken just before)
            return SendResult(status="queued", id=message_id, workflow=state)
        return SendResult(status="received", id=message_id)  # by an iteration since finished and compacted away
    entry, recorded = receipt
    if recorded.completed:
        return None  # answered: its response is being read
    if recorded.completable is False or _iteration_finished(snapshot.history, entry.location):
        return SendResult(status="received", id=message_id)  # nothing was to answer it, or can any more
    # Open and completable (or recorded before receives said whether they were): only an ended workflow
    # will certainly not answer it.
    return SendResult(status="received", id=message_id, workflow=state) if ended else None


def _receipt(history: Sequence[HistoryEntry], message_id: str) -> tuple[HistoryEntry, RecordedMessage] | None:
    for entry in history:
        if entry.kind is EntryKind.MESSAGE:
            for recorded in entry.messages:
                if recorded.id == message_id:
                    return entry, recorded
    return None


def _iteration_finished(history: Sequence[HistoryEntry], location: str) -> bool:
    """True when `location` lies in a loop iteration that is over: nothing there can complete a message any
    more (a completion runs in the scope that holds the received message)."""
    loops = {e.location: e for e in history if e.kind is EntryKind.LOOP}
    parts = location.split(SEPARATOR)
    for index, part in enumerate(parts):
        if not part.startswith(ITERATION_MARK):
            continue
        loop = loops.get(SEPARATOR.join(parts[:index]))
        iteration = int(part[len(ITERATION_MARK):])
        if loop is None or loop.status is EntryStatus.COMPLETED or loop.iteration > iteration:
            return True
    return False
