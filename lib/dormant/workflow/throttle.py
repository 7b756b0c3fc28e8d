"""A step's limit (`ctx.step(..., limit="stripe")`): ask the host for a slot right before the body runs.

Asking is I/O, so it goes through the host (`WorkflowHost.acquire_limit`: the runtime asks the store). A refusal
suspends the step like a retry, without counting an attempt: `Suspend(reason="limit")` until the host's retry time,
with the limit's name on the workflow record (`waiting_for.limits`: "waits for limit stripe"). A short wait, or one
beside a step running in another branch, is waited in process instead (dormant.workflow.waits: the same rule as any
other wait). Nothing of the limit is recorded but when the step began waiting (`throttled_since`, its place in the
limit's line of waiters), so histories recorded before limits, or with other limits, replay unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from dormant.workflow.entries import Entry
from dormant.workflow.errors import WorkflowDefinitionError
from dormant.workflow.execution import Execution, run_to_the_end, settle_eagerly
from dormant.workflow.frame import Frame
from dormant.workflow.host import Granted, Refused, SlotAsk
from dormant.workflow.signals import Suspend, WakeAborted
from dormant.workflow.waits import Outcome, wait_in_process


def acquire(frame: Frame, entry: Entry, limit: str, timeout: float | None, key: str | None = None,
            priority: int | None = None) -> Granted | Coroutine[Any, Any, Granted]:
    """A slot for `entry`'s next attempt: the Granted itself when the host grants it at once (no coroutine or turn
    of the event loop: a free slot on the memory store), else a coroutine to await for it, which waits in process
    while that is allowed, else raises Suspend. `key`, `priority`: the step's `limit_key=` and `priority=` (the host
    checks them: WorkflowDefinitionError)."""
    first = _ask(frame.execution, entry, limit, timeout, key, priority)
    if first[0] and isinstance(first[1], Granted):
        return first[1]
    return _acquire(frame, entry, limit, timeout, key, priority, first)


def _ask(ex: Execution, entry: Entry, limit: str, timeout: float | None, key: str | None,
         priority: int | None) -> tuple[bool, Any, float]:
    """Ask at once, in this task (settle_eagerly): a store that answers without waiting (memory) costs no task and
    no turn of the event loop; one that waits goes on in a task of its own. Returns settle_eagerly's pair and the
    step's place in the limit's line (when it began waiting, or now)."""
    since = entry.throttled_since
    place = ex.now() if since is None else since  # its place in line: the store's key for it, and the record's
    try:
        answer = ex.host.acquire_limit(SlotAsk(limit, entry.location, timeout, place, since is not None, key, priority))
    except Exception as error:  # (raised at once: as if by the coroutine, a failed ask)
        answer = _raise(error)
    if isinstance(answer, (Granted, Refused)):  # the host's answer at once (memory): no coroutine at all
        return True, answer, place
    finished, asking = settle_eagerly(answer)
    return finished, asking, place


async def _raise(error: Exception) -> Granted | Refused:
    raise error


async def _acquire(frame: Frame, entry: Entry, limit: str, timeout: float | None, key: str | None,
                   priority: int | None, first: tuple[bool, Any, float] | None) -> Granted:
    ex = frame.execution
    while True:
        since = entry.throttled_since
        finished, asking, place = first if first is not None else _ask(ex, entry, limit, timeout, key, priority)
        first = None
        if finished:  # answered without a turn of the event loop: nothing else ran meanwhile
            answer: Granted | Refused = asking
        else:
            answer = await _answer(ex, asking)
        if isinstance(answer, Granted):
            return answer  # (the attempt clears `throttled_since`)
        if since is None:
            entry.put("throttled_since", place)
            ex.touch(entry)  # its place in line, kept by the suspension's commit
        beside_a_step = ex.in_flight > 0
        outcome = await wait_in_process(ex, answer.retry_at, messages=False)
        frame.check_cancelled()
        if outcome is Outcome.DUE:
            continue
        if beside_a_step and not ex.in_flight:
            # The wait ended because the steps beside it did: one of them may have held this limit and freed it.
            # (With a step still running it ended with the budget: suspend.)
            continue
        raise Suspend(deadline=answer.retry_at, reason="limit", limits=(answer.limit,))


async def _answer(ex: Execution, asking: asyncio.Future[Granted | Refused]) -> Granted | Refused:
    """The answer of an ask that did not finish at once (a store's round trip, or its error)."""
    # Asking counts as running the step: a wait in another branch waits in process beside it, as beside its body.
    ex.step_started()
    try:
        return asking.result() if asking.done() else await asyncio.shield(asking)
    except asyncio.CancelledError:
        # Cancelled while asking (a race lost): the store may have given the slot all the same. Finish the ask
        # and give back what it got, then go on being cancelled.
        await run_to_the_end(_give_back(ex, asking))
        raise
    except WorkflowDefinitionError:  # a limit_key or priority its limit does not take: the code's error
        raise
    except Exception as error:  # the store failed under the ask: the wake-up is void, as for a commit
        raise WakeAborted(error) from error
    finally:
        ex.ask_ended()


async def _give_back(ex: Execution, asking: asyncio.Future[Granted | Refused]) -> None:
    try:
        answer = await asking
    except Exception:
        return  # nothing was granted (or the store failed: a slot it gave frees itself at its lease's end)
    if isinstance(answer, Granted):
        releasing = ex.host.release_limit(answer)
        if releasing is not None:
            await releasing
