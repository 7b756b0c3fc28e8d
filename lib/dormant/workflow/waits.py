"""In-process waits: a sleep, a queue wait or a race timer that resolves in the running wake-up.

A wait whose deadline is near (at most `WaitPort.inline_wait` away; the port is in dormant.workflow.host) and
within the wake-up's time budget (`WaitPort.horizon`), or any wait while a step runs in another branch, is waited
for here instead of suspending the actor: a timer can then win a race against a running step at its time, a
message that arrives meanwhile is received at once, and a short wait costs no suspension round trip. What the
wait decides (the deadline passed, messages were received) is recorded by the caller, so replay never depends
on timing. The rule is stated in docs/semantics.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from enum import Enum
from typing import Any

from dormant.workflow.execution import Execution
from dormant.workflow.history import QueuedMessage
from dormant.workflow.signals import WakeAborted


class Outcome(Enum):
    DUE = "due"  # the deadline has passed
    MESSAGES = "messages"  # new messages are in the execution's inbox
    SUSPEND = "suspend"  # not here: suspend the actor as usual


async def wait_in_process(ex: Execution, deadline: float | None, *, messages: bool) -> Outcome:
    """Wait in the running wake-up until `deadline` (None: no deadline) or, with `messages`, a new message.

    Returns SUSPEND at once when the wait does not qualify, and later when the budget ends first or, for a
    wait that only qualified because a step runs elsewhere, when no step runs any more."""
    port = ex.waits
    if port is None:
        return Outcome.SUSPEND
    now = ex.now()
    if deadline is not None and now >= deadline:
        return Outcome.DUE
    end = port.horizon if deadline is None else min(deadline, port.horizon)
    short = deadline is not None and deadline <= port.horizon and deadline - now <= port.inline_wait
    if end <= now or not (short or ex.in_flight):
        return Outcome.SUSPEND
    # Before waiting, commit finished step results (as before a side effect): a crash during the wait
    # then costs nothing done so far. With a step in flight this waits for the next quiet moment.
    await ex.flush()
    while True:
        now = ex.now()
        if deadline is not None and now >= deadline:
            return Outcome.DUE
        if now >= end or not (short or ex.in_flight):
            return Outcome.SUSPEND
        waiters: list[Awaitable[Any]] = [port.sleep_until(end)]
        inbox: asyncio.Future[list[QueuedMessage]] | None = None
        if messages:
            inbox = asyncio.ensure_future(port.new_messages(max(end - now, 0.0)))
            waiters.append(inbox)
        if not short:
            waiters.append(ex.when_idle())
        await _first(waiters)
        if inbox is not None and inbox.done() and not inbox.cancelled():
            error = inbox.exception()
            if error is not None:  # a storage error under the wait: the wake-up is void, as for a commit
                raise WakeAborted(error) from error
            fresh = inbox.result()
            if fresh:
                ex.add_inbox(fresh)
                return Outcome.MESSAGES


async def _first(waiters: list[Awaitable[Any]]) -> None:
    """Wait until the first of `waiters` is done; cancel and reap the others (also when cancelled)."""
    tasks = [asyncio.ensure_future(w) for w in waiters]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
